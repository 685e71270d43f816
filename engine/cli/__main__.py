from engine.cli.main import entry

entry()
