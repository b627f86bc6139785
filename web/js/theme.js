// Light, dark, or the system's choice; remembered in localStorage. Every
// select given (the sidebar's, the settings page's) shows and sets it.
const KEY = 'tusko.theme';
const selects = [];

export function initTheme(select) {
  selects.push(select);
  const saved = localStorage.getItem(KEY) || 'system';
  select.value = saved;
  select.addEventListener('change', () => setTheme(select.value));
  if (selects.length > 1) return;
  apply(saved);
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => apply(localStorage.getItem(KEY) || 'system'));
}

function setTheme(choice) {
  localStorage.setItem(KEY, choice);
  for (const s of selects) s.value = choice;
  apply(choice);
}

function apply(choice) {
  const dark = choice === 'dark' || (choice === 'system' && matchMedia('(prefers-color-scheme: dark)').matches);
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
}
