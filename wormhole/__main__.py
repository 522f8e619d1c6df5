from wormhole.entry import main

main()
