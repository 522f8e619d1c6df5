from wormhole.cli import main

main()
