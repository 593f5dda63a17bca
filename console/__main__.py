from console.main import run

run()
