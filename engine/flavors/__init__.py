"""Task flavors' host side (``Flavor`` in engine/interfaces.py), chosen by ``flavor._target_``."""
