package runner

import (
	"slices"
	"strings"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/task"
)

// withPreamble puts a task's preamble (task.Preamble: what an OpenAI-style
// request carried besides its content) into its engine's input, the same on
// every attempt. Its user and assistant items are the oldest context, before
// the conversation's own history (an engine that trims history to a budget
// drops them first); its system and developer items join its instructions,
// after the preamble's own, a blank line between each. Its options go as
// they are. A task without a preamble changes nothing.
func withPreamble(in *engine.Input, t task.Task) {
	p := t.Preamble
	if p == nil {
		return
	}
	var parts []string
	if p.Instructions != "" {
		parts = append(parts, p.Instructions)
	}
	var items []task.Message
	for _, it := range p.Items {
		switch it.Role {
		case task.ItemUser, task.ItemAssistant:
			// Not messages of the conversation: they have no id.
			items = append(items, task.Message{ConversationID: t.ConversationID,
				Role: task.Role(it.Role), Content: it.Text})
		case task.ItemSystem, task.ItemDeveloper:
			if it.Text != "" {
				parts = append(parts, it.Text)
			}
		}
	}
	in.Instructions = strings.Join(parts, "\n\n")
	in.History = slices.Concat(items, in.History)
	in.Options = p.Options
}
