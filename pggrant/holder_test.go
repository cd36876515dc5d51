package pggrant_test

const holderEnv = "PGGRANT_TEST_HOLDER"

func runHolder() int { return 0 }
