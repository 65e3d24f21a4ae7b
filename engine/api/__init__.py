"""The room's API: one client interface (`RoomClient`), its in-process form (`LocalClient`)
and its remote form (`RemoteClient`), and the HTTP app the server loop serves."""
