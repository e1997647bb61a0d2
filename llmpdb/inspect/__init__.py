"""Pure inspection: live objects in, plain dataclasses out. Never prints, never imports pdb."""
