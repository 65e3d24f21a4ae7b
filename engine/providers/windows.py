"""How much a model can read, and a cheap count of what a conversation costs, tokenizer-free.

A conversation is kept inside its model's context window before it is sent, so the size of
the window and of each message must be known without a round trip. Vendors publish the
windows; this table holds the documented defaults for model names in common use, so a
configured model needs no setting of its own (an unknown name gets None: the caller falls
back to its own setting). No tokenizer ships with agentdeck, so `estimate_tokens` counts by
characters; the provider's reported usage (`UsageEvent.input_tokens`) is the true count.
"""

from __future__ import annotations

from functools import lru_cache

# Documented context windows in tokens, by lower-case name prefix; the longest prefix that
# matches wins (o1-mini before o1, gpt-4o before gpt-4). OpenAI and Anthropic: their model
# pages. Open models (as Ollama, vLLM or llama.cpp name them): the model cards' default
# (native) context, not a longer one reached with RoPE scaling such as YaRN.
WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-5":                  400_000,
    "gpt-5-chat":             128_000,
    "gpt-4.1":              1_047_576,
    "gpt-4.5":                128_000,
    "gpt-4o":                 128_000,
    "chatgpt-4o":             128_000,
    "gpt-4-turbo":            128_000,
    "gpt-4-1106":             128_000,
    "gpt-4-0125":             128_000,
    "gpt-4-vision":           128_000,
    "gpt-4-32k":               32_768,
    "gpt-4":                    8_192,
    "gpt-3.5-turbo":           16_385,
    "gpt-3.5-turbo-instruct":   4_096,
    "o1":                     200_000,
    "o1-mini":                128_000,
    "o1-preview":             128_000,
    "o3":                     200_000,
    "o4-mini":                200_000,
    "gpt-oss":                131_072,
    # Anthropic
    "claude-":                200_000,
    "claude-2.0":             100_000,
    "claude-instant":         100_000,
    # Open models
    "qwen2.5":                 32_768,
    "qwen3":                   32_768,
    "qwen3-coder":            262_144,
    "mistral":                 32_768,
    "mistral-nemo":           128_000,
    "mistral-large":          128_000,
    "mixtral":                 32_768,
    "mixtral-8x22b":           65_536,
    "gemma2":                   8_192,
    "gemma-2":                  8_192,
    "gemma3":                 128_000,
    "gemma-3":                128_000,
    "gemma3:1b":               32_768,
    "gemma-3-1b":              32_768,
    "llama2":                   4_096,
    "llama-2":                  4_096,
}  # fmt: skip
# Llama 3 has 8K; 3.1, 3.2 and 3.3 have 128K, spelled llama3.1 (Ollama), llama-3.1 (Groq,
# Hugging Face) or meta-llama-3.1 (Hugging Face, LM Studio).
WINDOWS |= {
    f"{head}{version}": window
    for version, window in (("3", 8_192), ("3.1", 128_000), ("3.2", 128_000), ("3.3", 128_000))
    for head in ("llama", "llama-", "meta-llama-")
}
_LONGEST_FIRST = sorted(WINDOWS.items(), key=lambda item: -len(item[0]))


@lru_cache(maxsize=256)
def context_window(model: str) -> int | None:
    """The documented context window of `model` in tokens, or None for a name not known.

    Case does not matter, nor a provider's or organisation's prefix (`openai/gpt-4o`,
    `Qwen/Qwen2.5-7B-Instruct`); a tag or date after the name (`llama3.1:8b`,
    `claude-sonnet-4-5-20250929`) matches by prefix.
    """
    name = model.rsplit("/", 1)[-1].strip().lower()
    for prefix, window in _LONGEST_FIRST:
        if name.startswith(prefix):
            return window
    return None


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` is, without a tokenizer: a quarter of its weight, rounded
    up, where an ASCII character weighs 1 and one outside ASCII 1 plus 2 for each UTF-8
    byte past its first.

    English and code run about 4 characters a token. Other scripts take more per character:
    Cyrillic or Greek (2 bytes) counts 3/4 of a token, Chinese or Japanese (3 bytes) 1 1/4,
    an emoji (4 bytes) 1 3/4, about what tokenizers spend on them or a little more. It is an
    estimate, not a bound (dense code or JSON can run 3 characters a token): keep a margin
    under the window, and trust the provider's reported input_tokens over it. Only len()
    arithmetic (and one encode for text outside ASCII), as it runs on every message.
    """
    size = len(text)
    if not text.isascii():
        size += 2 * (len(text.encode("utf-8", "surrogatepass")) - size)
    return -(-size // 4)
