"""Model providers: the offline model (embedded default) and real ones over httpx."""
