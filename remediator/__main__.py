from remediator.cli import main

main()
