from clawgate.gateway.cli import main

main()
