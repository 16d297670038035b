from gpudash.cli import main

main()
