"""Small helpers every test tier shares (importable as ``helpers``: pythonpath = ["tests"])."""
