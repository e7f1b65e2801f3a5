from sluiceway.runtime.main import main

main()
