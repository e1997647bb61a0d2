"""The only sockets: the attach listener, the attached seat, the client protocol.

Nothing is imported here: each module is imported where it is used (start-up time)."""
