from cellab.cli import main

main()
