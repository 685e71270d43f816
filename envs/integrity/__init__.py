"""The integrity catalogue the flavors share: defences, result sources and the scanner."""
