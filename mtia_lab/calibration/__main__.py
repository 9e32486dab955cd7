from .report import main

main()
