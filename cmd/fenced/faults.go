package main

// dialViaEnv names the variable that routes a test build's dials to peers
// through per-link proxies: "PEER=VIA,PEER=VIA" (see raftstore.TestHooks).
// The fault harness and cluster tests set it; a production build refuses it.
const dialViaEnv = "FENCED_TEST_DIAL_VIA"
