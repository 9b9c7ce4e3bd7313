package natsbus

import "fmt"

// PublishUser sends a user-level event (its wire JSON, such as a
// "conversation" event) to every tab of userID on every gateway, on the
// subject of the user's "task" events. Like those it is a core publish: a tab
// that misses one sees the change on its next read of the list.
func (b *Bus) PublishUser(userID string, data []byte) error {
	if err := b.nc.Publish(UserSubject(userID), data); err != nil {
		return fmt.Errorf("publish to user: %w", err)
	}
	return nil
}
