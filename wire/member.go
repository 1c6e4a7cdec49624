package wire

// KindRegisterMember records where a raft member's HTTP door is (group 0
// only). Peers forward to it and the promote check reads the member's
// progress from it, so it must be known cluster-wide for members that were
// never in QUEEN_RAFT_PEERS: the learner request carries it, and every node
// re-registers its own address at boot.
const KindRegisterMember Kind = 60

// RegisterMemberCmd maps a raft node id to its node-to-node HTTP address.
// An empty HTTPAddr forgets the node (it left the cluster).
type RegisterMemberCmd struct {
	NodeID   uint64
	HTTPAddr string // host:port
}

// Encode appends the command body.
func (c *RegisterMemberCmd) Encode(b []byte) []byte {
	w := Writer{B: b}
	w.Uvarint(c.NodeID)
	w.String(c.HTTPAddr)
	return w.B
}

// DecodeRegisterMemberCmd decodes a register-member body.
func DecodeRegisterMemberCmd(b []byte) (RegisterMemberCmd, error) {
	r := Reader{b: b}
	c := RegisterMemberCmd{NodeID: r.Uvarint(), HTTPAddr: r.String()}
	return c, r.Done()
}
