from conform.cli.main import main

main()
