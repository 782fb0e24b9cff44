from slatelake.cli import run

run()
