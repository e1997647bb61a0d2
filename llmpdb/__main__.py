"""``python -m llmpdb``: see ``llmpdb.cli``."""

from llmpdb.cli import main

if __name__ == "__main__":
    main()
