"""Fakes and scripted servers that ship with the package, so extensions can be tested too."""
