package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestTransitionGate tries every pair of statuses (and creation, from "")
// through the one transition function: it allows exactly the arrows of
// task.CanTransition and writes nothing for the others.
func TestTransitionGate(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	id := newTask(t, s, "alice").ID
	froms := append([]task.Status{""}, task.Statuses...)
	for _, from := range froms {
		for _, to := range append(task.Statuses, "bogus") {
			want := task.CanTransition(from, to) || (from == "" && to == task.StatusPending)
			before := len(transitions(t, s, id))
			err := s.Transition(ctx, id, 1, from, to, clk.Now())
			after := len(transitions(t, s, id))
			if want {
				if err != nil || after != before+1 {
					t.Errorf("%q -> %q: %v, %d rows written; want allowed and recorded", from, to, err, after-before)
				}
				continue
			}
			if !errors.Is(err, postgres.ErrForbiddenTransition) || after != before {
				t.Errorf("%q -> %q: %v, %d rows written; want refused", from, to, err, after-before)
			}
		}
	}
}

// TestSchemaEnforcesTheRules writes around the store to show the database
// itself refuses what the domain forbids.
func TestSchemaEnforcesTheRules(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	tk := newTask(t, s, "alice")
	bad := map[string]string{
		"unknown status":          `UPDATE tasks SET status = 'paused' WHERE id = $1`,
		"done without finish":     `UPDATE tasks SET status = 'done' WHERE id = $1`,
		"finish time on pending":  `UPDATE tasks SET finished_at = created_at WHERE id = $1`,
		"failed without error":    `UPDATE tasks SET status = 'failed', finished_at = created_at WHERE id = $1`,
		"running without lease":   `UPDATE tasks SET status = 'running' WHERE id = $1`,
		"progress over 100":       `UPDATE tasks SET progress = 101 WHERE id = $1`,
		"negative progress":       `UPDATE tasks SET progress = -1 WHERE id = $1`,
		"attempt 0":               `UPDATE tasks SET attempt = 0, submit_attempt = 0 WHERE id = $1`,
		"forbidden transition":    `INSERT INTO task_transitions (task_id, attempt, from_status, to_status, reason, at) VALUES ($1, 1, 'done', 'running', 'x', now())`,
		"creation not pending":    `INSERT INTO task_transitions (task_id, attempt, from_status, to_status, reason, at) VALUES ($1, 1, NULL, 'running', 'x', now())`,
		"unknown role":            `UPDATE messages SET role = 'system', status = NULL WHERE task_id = $1`,
		"user message status":     `UPDATE messages SET status = 'done' WHERE task_id = $1 AND role = 'user'`,
		"unknown message status":  `UPDATE messages SET status = 'thinking' WHERE task_id = $1 AND role = 'assistant'`,
		"message without conv":    `INSERT INTO messages (id, conversation_id, role, content, created_at) VALUES (gen_random_uuid(), gen_random_uuid(), 'user', 'x', now()) RETURNING $1::uuid`,
		"duplicate task id":       `INSERT INTO tasks SELECT * FROM tasks WHERE id = $1`,
		"task of a missing conv":  `UPDATE tasks SET conversation_id = gen_random_uuid() WHERE id = $1`,
		"user id over 128 bytes":  `UPDATE conversations SET user_id = repeat('u', 129) WHERE id = (SELECT conversation_id FROM tasks WHERE id = $1)`,
		"placeholder not message": `UPDATE tasks SET assistant_message_id = gen_random_uuid() WHERE id = $1`,
	}
	for name, q := range bad {
		if _, err := s.Pool().Exec(ctx, q, tk.ID); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
