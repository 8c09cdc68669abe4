package remote

import (
	"cmp"
	"slices"
	"sort"
	"strconv"

	"github.com/queenlite/queen"
)

// DefaultVirtualNodes is how many points each server has on the affinity
// ring unless [Options].VirtualNodes says otherwise: the number Queen's
// SDKs are tested with. Every client of one deployment must use the same
// number (and the same server URLs) for their keys to land on the same
// servers.
const DefaultVirtualNodes = 128

// fnv1a is the 32-bit FNV-1a hash of s's bytes. Queen's SDKs place servers
// and keys on their rings with it, so it is part of what a Go worker must
// compute exactly as they do.
func fnv1a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// vnode is one point of the ring: a hash and the server (an index into the
// client's server list) it stands for.
type vnode struct {
	hash   uint32
	server int
}

// ring is the affinity ring of some of a client's servers, sorted by hash.
type ring []vnode

// newRing places each member (an index into names) at replicas points,
// fnv1a(name + "#vnode" + i) for i from 0, names being the server URLs
// without a trailing slash.
func newRing(names []string, members []int, replicas int) ring {
	r := make(ring, 0, len(members)*replicas)
	for _, s := range members {
		for i := 0; i < replicas; i++ {
			r = append(r, vnode{hash: fnv1a(names[s] + "#vnode" + strconv.Itoa(i)), server: s})
		}
	}
	// Two servers on one hash are a 1 in 2^32 accident per pair of points;
	// the server order settles it so the ring does not depend on the sort.
	slices.SortFunc(r, func(a, b vnode) int {
		return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.server, b.server))
	})
	return r
}

// owner returns the server the key goes to: that of the first point whose
// hash is at least the key's, or of the last point when none is (Queen's
// SDKs do not wrap around to the first). It returns -1 on an empty ring.
func (r ring) owner(key string) int {
	if len(r) == 0 {
		return -1
	}
	h := fnv1a(key)
	i := sort.Search(len(r), func(i int) bool { return r[i].hash >= h })
	if i == len(r) {
		i--
	}
	return r[i].server
}

// affinityKey is the key a pop of queue (and partition, when named) by
// group is routed with, in the form Queen's SDKs use and its server
// groups long polls by: "queue:partition:group", with "*" for a pop of no
// named partition (Queen's SDKs take the Default partition for that too)
// and __QUEUE_MODE__ for no group. It is empty, routing round-robin,
// without a queue.
func affinityKey(queue, partition, group string) string {
	if queue == "" {
		return ""
	}
	if partition == "" || partition == queen.DefaultPartition {
		partition = "*"
	}
	if group == "" {
		group = queen.QueueModeGroup
	}
	return queue + ":" + partition + ":" + group
}

// popRoute is the affinity key of a pop.
func popRoute(req *queen.PopRequest) string {
	return affinityKey(req.Queue, req.Partition, req.Group)
}

// pushRoute is the affinity key of a push: that of a pop in queue mode of
// the items' queue and partition, as Queen's SDKs key a push, when they all
// share one; none (round-robin) when they do not.
func pushRoute(items []queen.PushItem) string {
	if len(items) == 0 {
		return ""
	}
	part := func(it *queen.PushItem) string {
		if it.Partition == "" {
			return queen.DefaultPartition
		}
		return it.Partition
	}
	q, p := items[0].Queue, part(&items[0])
	for i := range items[1:] {
		if it := &items[i+1]; it.Queue != q || part(it) != p {
			return ""
		}
	}
	return affinityKey(q, p, "")
}
