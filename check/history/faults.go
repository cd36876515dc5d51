package history

// Fault kinds, as named on the command line and in Op.Fault.
const (
	FaultPauseClient = "pause-client"
	FaultPauseServer = "pause-server"
	FaultKill        = "kill"
	FaultPartition   = "partition"
	FaultTransfer    = "transfer"
	FaultSkew        = "skew"
	FaultMembership  = "membership"
)

// AllFaults lists every fault kind.
var AllFaults = []string{FaultPauseClient, FaultPauseServer, FaultKill, FaultPartition, FaultTransfer, FaultSkew, FaultMembership}
