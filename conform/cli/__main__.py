from conform.cli import main

main()
