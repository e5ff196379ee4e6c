// The API tokens page: "Copy" puts a new token on the clipboard and says so (aria-live).
// No inline script: the Content-Security-Policy allows only files like this one.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy-target]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copyTarget);
  const status = document.getElementById(button.dataset.copyStatus);
  if (!field) return;
  try {
    await navigator.clipboard.writeText(field.value);
    if (status) status.textContent = button.dataset.copiedText;
  } catch {
    // No clipboard access (an insecure origin, a refused permission): select it for Ctrl+C.
    field.focus();
    field.select();
    if (status) status.textContent = button.dataset.selectText;
  }
});
