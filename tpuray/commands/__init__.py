"""Subcommands of `tpuray`: one module each, with register(subparsers)."""
