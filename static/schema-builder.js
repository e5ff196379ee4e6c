// The schema builder of the task form (issue #18): fields with a name, a type, "required", a
// description, nested groups and lists, written as a JSON schema into the form's schema box.
// The box is what the form submits and the server validates; without this file it is typed in.
// A schema the builder cannot show faithfully is left to the box (the builder says so).
(function () {
  "use strict";

  var SIMPLE = { text: "string", number: "number", integer: "integer", "yes-no": "boolean" };
  var KINDS = { string: "text", number: "number", integer: "integer", boolean: "yes-no" };
  var KNOWN = ["type", "properties", "required", "items", "description"];

  function has(object, key) { return Object.prototype.hasOwnProperty.call(object, key); }

  // The builder's kind for a JSON type, or undefined ("toString" is no type of ours).
  function kindOf(type) { return typeof type === "string" && has(KINDS, type) ? KINDS[type] : undefined; }

  function emptyField() {
    return { name: "", type: "text", items: "text", required: true, description: "", fields: [] };
  }

  // Fields -> schema -------------------------------------------------------------------------

  function objectSchema(fields) {
    // No prototype: a field named "__proto__" is a property like any other.
    var schema = { type: "object", properties: Object.create(null), required: [] };
    fields.forEach(function (field) {
      var name = field.name.trim();
      if (!name) { return; }
      var prop;
      if (field.type === "object") {
        prop = objectSchema(field.fields);
      } else if (field.type === "list") {
        prop = { type: "array", items: field.items === "object" ? objectSchema(field.fields) : { type: SIMPLE[field.items] } };
      } else {
        prop = { type: SIMPLE[field.type] };
      }
      if (field.description.trim()) { prop.description = field.description.trim(); }
      schema.properties[name] = prop;
      if (field.required) { schema.required.push(name); }
    });
    if (!schema.required.length) { delete schema.required; }
    return schema;
  }

  function toSchema(root, fields) {
    if (!root) { return null; }
    var record = objectSchema(fields);
    return root === "array" ? { type: "array", items: record } : record;
  }

  // Schema -> fields (null: the builder cannot show it) ---------------------------------------

  function onlyKnown(schema) {
    return Object.keys(schema).every(function (key) { return KNOWN.indexOf(key) !== -1; }) &&
      (!has(schema, "description") || typeof schema.description === "string");
  }

  // A description the builder has no place for (the root's, a list's items'): left to the box.
  function untitled(schema) { return !has(schema, "description"); }

  function fieldsOf(schema) {
    if (!schema || schema.type !== "object" || !onlyKnown(schema)) { return null; }
    var required = Array.isArray(schema.required) ? schema.required : [];
    var fields = [];
    var props = schema.properties || {};
    var names = Object.keys(props);
    for (var i = 0; i < names.length; i++) {
      var prop = props[names[i]];
      if (!prop || typeof prop !== "object" || !onlyKnown(prop)) { return null; }
      var field = emptyField();
      field.name = names[i];
      field.required = required.indexOf(names[i]) !== -1;
      field.description = typeof prop.description === "string" ? prop.description : "";
      if (kindOf(prop.type)) {
        field.type = kindOf(prop.type);
      } else if (prop.type === "object") {
        field.type = "object";
        field.fields = fieldsOf(prop);
        if (field.fields === null) { return null; }
      } else if (prop.type === "array" && prop.items && typeof prop.items === "object" &&
                 onlyKnown(prop.items) && untitled(prop.items)) {
        field.type = "list";
        if (kindOf(prop.items.type)) {
          field.items = kindOf(prop.items.type);
        } else if (prop.items.type === "object") {
          field.items = "object";
          field.fields = fieldsOf(prop.items);
          if (field.fields === null) { return null; }
        } else {
          return null;
        }
      } else {
        return null;
      }
      fields.push(field);
    }
    return fields;
  }

  function fromSchema(schema) {
    if (schema === null) { return { root: "", fields: [] }; }
    if (typeof schema !== "object" || Array.isArray(schema)) { return null; }
    if (!untitled(schema)) { return null; }
    if (schema.type === "array" && schema.items && onlyKnown(schema) && !schema.properties) {
      var rows = untitled(schema.items) ? fieldsOf(schema.items) : null;
      return rows === null ? null : { root: "array", fields: rows };
    }
    var fields = fieldsOf(schema);
    return fields === null ? null : { root: "object", fields: fields };
  }

  if (typeof module === "object" && module.exports) {
    // Node, for tests/crews/test_task_form.py: the two conversions, without a page.
    module.exports = { fromSchema: fromSchema, toSchema: toSchema };
    return;
  }

  // The builder -------------------------------------------------------------------------------

  function init(form) {
    var builder = form.querySelector("[data-schema-builder]");
    var box = form.querySelector("[data-schema-source]");
    var rowTemplate = form.querySelector("template[data-schema-row]");
    if (!builder || !box || !rowTemplate || builder.dataset.ready) { return; }
    builder.dataset.ready = "1";
    var body = builder.querySelector("[data-schema-body]");
    var unsupported = builder.querySelector("[data-schema-unsupported]");
    var topList = body.querySelector("[data-schema-fields]");

    function rowFor(field) {
      var row = rowTemplate.content.firstElementChild.cloneNode(true);
      row.querySelector('[data-key="name"]').value = field.name;
      row.querySelector('[data-key="type"]').value = field.type;
      row.querySelector('[data-key="items"]').value = field.items;
      row.querySelector('[data-key="required"]').checked = field.required;
      row.querySelector('[data-key="description"]').value = field.description;
      var nested = row.querySelector("[data-schema-fields]");
      field.fields.forEach(function (child) { nested.appendChild(rowFor(child)); });
      showNested(row);
      return row;
    }

    function showNested(row) {
      var type = row.querySelector('[data-key="type"]').value;
      var items = row.querySelector('[data-key="items"]').value;
      row.querySelector("[data-items-label]").hidden = type !== "list";
      row.querySelector("[data-schema-nested]").hidden = !(type === "object" || (type === "list" && items === "object"));
    }

    function read(list) {
      return Array.prototype.filter.call(list.children, function (el) {
        return el.matches("[data-schema-field]");
      }).map(function (row) {
        return {
          name: row.querySelector('[data-key="name"]').value,
          type: row.querySelector('[data-key="type"]').value,
          items: row.querySelector('[data-key="items"]').value,
          required: row.querySelector('[data-key="required"]').checked,
          description: row.querySelector('[data-key="description"]').value,
          fields: read(row.querySelector("[data-schema-fields]")),
        };
      });
    }

    function root() {
      var chosen = builder.querySelector("[data-schema-root]:checked");
      return chosen ? chosen.value : "";
    }

    function write() {
      var schema = toSchema(root(), read(topList));
      box.value = schema === null ? "" : JSON.stringify(schema, null, 2);
      body.hidden = !root();
    }

    function load() {
      var text = box.value.trim();
      var parsed;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch (e) {
        parsed = undefined;
      }
      var model = parsed === undefined ? null : fromSchema(parsed);
      unsupported.hidden = model !== null;
      builder.querySelectorAll("[data-schema-root]").forEach(function (radio) {
        radio.disabled = model === null;
        radio.checked = model !== null && radio.value === model.root;
      });
      body.hidden = model === null || !model.root;
      if (model === null) { return; }
      topList.replaceChildren.apply(topList, model.fields.map(rowFor));
    }

    builder.addEventListener("click", function (event) {
      var add = event.target.closest("[data-schema-add]");
      var remove = event.target.closest("[data-schema-remove]");
      if (add) {
        var list = add.parentElement.querySelector("[data-schema-fields]");
        var row = rowFor(emptyField());
        list.appendChild(row);
        row.querySelector('[data-key="name"]').focus();
        write();
      } else if (remove) {
        var gone = remove.closest("[data-schema-field]");
        var next = gone.nextElementSibling || gone.previousElementSibling;
        gone.remove();
        write();
        var focusOn = next ? next.querySelector('[data-key="name"]') : builder.querySelector("[data-schema-add]");
        if (focusOn) { focusOn.focus(); }
      }
    });
    builder.addEventListener("change", function (event) {
      var row = event.target.closest("[data-schema-field]");
      if (row) { showNested(row); }
      if (event.target.matches("[data-schema-root]") && event.target.value && !read(topList).length) {
        topList.appendChild(rowFor(emptyField()));
      }
      write();
    });
    builder.addEventListener("input", write);
    box.addEventListener("input", load);  // an expert's edit shows in the builder when it can

    load();
    builder.hidden = false;
    var raw = form.querySelector("[data-schema-raw]");
    var invalid = box.getAttribute("aria-invalid") === "true";
    if (raw && !invalid && unsupported.hidden) { raw.open = false; }
  }

  function initAll(root) {
    var forms = root.querySelectorAll ? root.querySelectorAll("form") : [];
    Array.prototype.forEach.call(forms, init);
    if (root.matches && root.matches("form")) { init(root); }
  }

  document.addEventListener("DOMContentLoaded", function () { initAll(document); });
  // The task form is swapped whole by htmx after a POST with errors.
  document.addEventListener("htmx:load", function (event) { initAll(event.target); });
})();
