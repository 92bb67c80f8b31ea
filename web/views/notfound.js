import { h } from '../lib/dom.js';

export function renderNotFound(root, ctx) {
  ctx.setTitle('Not found');
  const home = ctx.home || { href: '#/queues', label: 'Go to the queues' };
  root.append(h('section', { class: 'page' },
    h('h1', null, 'Page not found'),
    h('p', { class: 'muted' }, 'There is nothing at this address. ', h('a', { href: home.href }, home.label), '.')));
  return null;
}
