"""`python -m nanohermes` runs the same entry point as the console script."""

from nanohermes.cli import main

main()
