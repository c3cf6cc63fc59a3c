from pkroof.cli import app

app(prog_name="pkroof")
