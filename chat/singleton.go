package chat

// Singleton is an adapter whose Run may be active on one replica only at
// a time: Telegram long polling (two getUpdates callers make each other
// fail), a Discord gateway shard. The gateway runs Run under the cluster
// lease named by SingletonKey and cancels it when the lease is lost; Send,
// Edit and the other calls work on every replica, whether Run is active
// there or not. SingletonKey returns "" when this instance needs no lease
// (Telegram in webhook mode: any replica may take a delivery).
type Singleton interface {
	SingletonKey() string
}
