import { h } from './dom';

/**
 * The message box: Enter sends, Shift+Enter adds a line. While the open
 * conversation has an answer in progress there is no way to send: the button
 * is disabled and says why, so a running task never gets a "send again".
 */
export class Composer {
  readonly el: HTMLFormElement;
  readonly input: HTMLTextAreaElement;
  private readonly button: HTMLButtonElement;
  private readonly hint: HTMLElement;
  private busy = false;

  constructor(onSend: (text: string) => boolean) {
    this.input = h('textarea', { rows: '1', placeholder: 'Message Tether', 'aria-label': 'Message', 'data-testid': 'composer-input', enterkeyhint: 'send' });
    this.button = h('button', { type: 'submit', class: 'send', 'aria-label': 'Send', 'data-testid': 'send-button' }, h('span', { 'aria-hidden': 'true' }, '↑'));
    this.hint = h('div', { class: 'hint', 'data-testid': 'composer-hint' });
    this.el = h('form', { class: 'composer', 'data-testid': 'composer' }, h('div', { class: 'composer-box' }, this.input, this.button), this.hint);
    const send = () => {
      const value = this.input.value;
      if (this.busy || value.trim() === '') return;
      if (onSend(value)) {
        this.input.value = '';
        this.grow();
        this.sync();
      }
    };
    this.el.addEventListener('submit', (ev) => {
      ev.preventDefault();
      send();
    });
    this.input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        send();
      }
    });
    this.input.addEventListener('input', () => {
      this.grow();
      this.sync();
    });
    this.sync();
  }

  setBusy(busy: boolean): void {
    this.busy = busy;
    this.sync();
  }

  private sync(): void {
    this.button.disabled = this.busy || this.input.value.trim() === '';
    this.el.dataset.busy = String(this.busy);
    this.hint.textContent = this.busy ? 'An answer is in progress. Stop it or wait for it to finish.' : 'Enter to send, Shift+Enter for a new line';
  }

  private grow(): void {
    this.input.style.height = 'auto';
    this.input.style.height = `${Math.min(this.input.scrollHeight, 200)}px`;
  }
}
