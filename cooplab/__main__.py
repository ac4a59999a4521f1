from cooplab.cli import main

main()
