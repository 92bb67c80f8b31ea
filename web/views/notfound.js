import { h } from '../lib/dom.js';

export function renderNotFound(root, ctx) {
  ctx.setTitle('Not found');
  root.append(h('section', { class: 'page' },
    h('h1', null, 'Page not found'),
    h('p', { class: 'muted' }, 'There is nothing at this address. ', h('a', { href: '#/queues' }, 'Go to the queues'), '.')));
  return null;
}
