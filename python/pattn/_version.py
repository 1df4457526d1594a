__version__ = "0.1.0"  # the repository's VERSION file (a test keeps them equal)
