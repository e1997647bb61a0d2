"""``python -m llmpdb``: see ``llmpdb.cli.main``."""

from llmpdb.cli.main import main

if __name__ == "__main__":
    main()
