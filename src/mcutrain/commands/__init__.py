"""One module per `mcutrain` subcommand; each defines `register(subparsers)`."""
