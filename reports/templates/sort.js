document.querySelectorAll("table.sortable").forEach(table => {
  table.querySelectorAll("th").forEach((th, col) => th.addEventListener("click", () => {
    const asc = th.dataset.order !== "asc";
    table.querySelectorAll("th").forEach(h => delete h.dataset.order);
    th.dataset.order = asc ? "asc" : "desc";
    const key = row => {
      const c = row.cells[col];
      return c.dataset.sort !== undefined ? c.dataset.sort : c.textContent.trim();
    };
    const rows = Array.from(table.tBodies[0].rows);
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === "" || y === "") return (x === "") - (y === "");
      const nx = parseFloat(x), ny = parseFloat(y);
      const d = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? d : -d;
    });
    rows.forEach(r => table.tBodies[0].appendChild(r));
  }));
});
