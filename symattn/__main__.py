from symattn.cli.program import run

if __name__ == "__main__":  # not when a worker process (spawn) imports the module
    raise SystemExit(run())
