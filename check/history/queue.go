package history

// Operation kinds of the queue and latch workloads.
const (
	// OpPush is a push of Value to queue Name; on success Item.
	OpPush Kind = "push"
	// OpClaim is a claim from queue Name; on success Item, Token (the
	// claim token) and Scope ("queue/item").
	OpClaim Kind = "claim"
	// OpAck is an ack of Item of queue Name with Token. Result "probe"
	// marks an ack a worker sent on purpose with a token that is not its
	// claim's (it must be refused).
	OpAck Kind = "ack"
	// OpNack is a nack of Item of queue Name with Token.
	OpNack Kind = "nack"
	// OpQueueItem is one item of queue Name (Item) the harness found at
	// the end (process FinalProcess): Result "queued" (in the queue,
	// claimed or not) or "dead" (in the dead-letter queue; Item is its id
	// in Name). One OpQueueItem with Result "complete" and Outcome OK
	// says the whole queue was read.
	OpQueueItem Kind = "queue_item"
	// OpLatchCreate is a create of generation Gen of latch Name with
	// count Initial.
	OpLatchCreate Kind = "latch_create"
	// OpCountDown is a count-down of generation Gen of latch Name: Result
	// counted, completed, already_complete or stale_generation; Count is
	// what was left of Gen after it (when the reply said), Initial the
	// generation's initial count.
	OpCountDown Kind = "count_down"
	// OpLatchWait is a wait on generation Gen of latch Name: Result
	// "completed" (released at zero) or "replaced"; Outcome Unknown when
	// it ran out. Initial is the generation's initial count.
	OpLatchWait Kind = "latch_wait"
)
