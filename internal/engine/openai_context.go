package engine

import (
	"slices"

	"github.com/tether-dev/tether/internal/task"
)

// chatMessage is one entry of a chat completions request's messages.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// messageOverheadTokens is what a message costs beyond its text (role and
// separators in the model's chat template); OpenAI documents about 4.
const messageOverheadTokens = 4

// estimateTokens is a tokenizer-free estimate of a text's tokens: one per 4
// bytes, rounded up, plus the per-message overhead. English averages about
// 4 characters a token; most other scripts take more bytes per character,
// so the estimate stays on the safe side for them too.
func estimateTokens(s string) int {
	return (len(s)+3)/4 + messageOverheadTokens
}

// buildMessages assembles what the model sees for one task: the system
// prompt (if any) first, then the newest complete exchanges of history that
// fit in budget estimated tokens, then the current user message, and last,
// when the answer continues one kept from a lost runner, prefix as an
// assistant message for the model to carry on (see ContinuePrefill).
//
// An exchange is a user message immediately followed by a usable assistant
// answer (non-empty, not failed, cancelled or still generating). A user
// message whose answer is unusable is left out with it, so the model sees
// strictly alternating turns (some chat templates, served by vLLM for
// example, reject two user turns in a row) and never a question it was
// not shown the answer to. Messages of the current task (its own user
// message and answer placeholder, should the caller include them) are
// ignored, since the current message is always added last. Exchanges are
// kept newest first and the first one that does not fit ends the history,
// so what is sent is always a contiguous, most recent stretch. A budget
// <= 0 sends no history. The system prompt, the current message and the
// prefix are always sent, whatever their size; the prefix takes its share
// of budget first, since it grows with the answer (one that ran long before
// its runner was lost can fill a context window) and older history is
// what the answer needs least. Attached files go with the user message they
// came with (attachments.go): the current message's texts take their share
// next, then each kept exchange's while they fit; a file whose text does not
// fit is named.
func buildMessages(system string, history []task.Message, currentTaskID, current, prefix string, budget int, files []task.AttachmentFile) []chatMessage {
	if prefix != "" {
		budget -= estimateTokens(prefix)
	}
	// The current message's files come first (they are the newest), then
	// each kept exchange's, newest first; see attachments.go.
	own, byMessage := splitFiles(files)
	current, budget = withFiles(current, own, budget)
	type exchange struct{ userID, user, assistant string }
	var all []exchange
	for i := 0; i+1 < len(history); i++ {
		u, a := history[i], history[i+1]
		if u.Role != task.RoleUser || a.Role != task.RoleAssistant ||
			ofTask(u, currentTaskID) || ofTask(a, currentTaskID) || !usableAnswer(a) {
			continue
		}
		all = append(all, exchange{u.ID, u.Content, a.Content})
		i++
	}

	var kept []exchange
	used := 0
	for _, ex := range slices.Backward(all) {
		named := withNames(ex.user, byMessage[ex.userID])
		cost := estimateTokens(named) + estimateTokens(ex.assistant)
		if used+cost > budget {
			break
		}
		used += cost
		// Its text files go in while they fit; the others stay named.
		var left int
		ex.user, left = withFiles(ex.user, byMessage[ex.userID], budget-used)
		used = budget - left
		kept = append(kept, ex)
	}
	slices.Reverse(kept)

	msgs := make([]chatMessage, 0, 3+2*len(kept))
	if system != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: system})
	}
	for _, ex := range kept {
		msgs = append(msgs,
			chatMessage{Role: string(task.RoleUser), Content: ex.user},
			chatMessage{Role: string(task.RoleAssistant), Content: ex.assistant})
	}
	msgs = append(msgs, chatMessage{Role: string(task.RoleUser), Content: current})
	if prefix != "" {
		msgs = append(msgs, chatMessage{Role: string(task.RoleAssistant), Content: prefix})
	}
	return msgs
}

// ofTask reports whether m belongs to the task with id (never for "").
func ofTask(m task.Message, id string) bool {
	return id != "" && m.TaskID != nil && *m.TaskID == id
}

// usableAnswer reports whether an assistant message is a finished answer
// worth showing the model again: a failed or cancelled answer is partial,
// and a generating one is empty or in flight.
func usableAnswer(m task.Message) bool {
	if m.Content == "" {
		return false
	}
	if m.Status == nil {
		return true
	}
	switch *m.Status {
	case string(task.StatusFailed), string(task.StatusCancelled), task.MessageGenerating:
		return false
	}
	return true
}
