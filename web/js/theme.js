// Light, dark, or the system's choice; remembered in localStorage.
const KEY = 'tusko.theme';

export function initTheme(select) {
  const saved = localStorage.getItem(KEY) || 'system';
  apply(saved);
  select.value = saved;
  select.addEventListener('change', () => {
    localStorage.setItem(KEY, select.value);
    apply(select.value);
  });
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => apply(localStorage.getItem(KEY) || 'system'));
}

function apply(choice) {
  const dark = choice === 'dark' || (choice === 'system' && matchMedia('(prefers-color-scheme: dark)').matches);
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
}
