"""The voice library: voices users upload, stored and used by name."""
