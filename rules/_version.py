"""The version of the distribution `pullbacks` (both import packages share it)."""
__version__ = "0.2.0.dev0"
