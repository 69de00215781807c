/*
 * Editor code shared by the charging nodes' dialogs, served by Node-RED from the
 * package's resources/ folder (resources/@chargectl/node-red-charging-session/…).
 * Each node's .html loads it before its inline RED.nodes.registerType, which
 * stays in the .html so that flow-library validation sees every node type.
 *
 * isLoopback is the same rule as nodes/lib/settings.ts isLoopback (a test keeps
 * them equal): the dialog refuses exactly what the runtime refuses.
 */
(function (root) {
    'use strict';
    if (root.ChargingEditor) { return; }
    var NS = '@chargectl/node-red-charging-session/charging-service:charging-service.';
    var TYPES = ['str', 'msg', 'flow', 'global', 'env', 'jsonata'];
    var ENV_REFERENCE = /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/;

    function t(key, values) {
        return root.RED ? root.RED._(NS + key, values) : key;
    }

    /** localhost, *.localhost, 127.0.0.0/8 and ::1. */
    function isLoopback(hostname) {
        var h = String(hostname).replace(/^\[|\]$/g, '').toLowerCase();
        return h === 'localhost' || /\.localhost$/.test(h) || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
    }

    /**
     * The URL rule of the config dialog, as a Node-RED 3.1+ validator: two
     * arguments, so that a returned message marks the field and is shown.
     */
    function urlValidator(labelKey) {
        return function (v, _opt) {
            var value = String(v || '').trim();
            if (!value) { return t('errors.required', { field: t('label.' + labelKey) }); }
            if (ENV_REFERENCE.test(value)) { return true; }
            var url;
            try { url = new URL(value); } catch (_e) { return t('errors.url'); }
            if (url.protocol !== 'https:' && url.protocol !== 'http:') { return t('errors.url'); }
            if (url.username || url.password) { return t('errors.userinfo'); }
            var box = root.$ ? root.$('#node-config-input-allowInsecureHttp') : [];
            var insecureAllowed = box.length ? box.is(':checked') : this.allowInsecureHttp === true;
            if (url.protocol === 'http:' && !isLoopback(url.hostname) && !insecureAllowed) { return t('errors.https'); }
            return true;
        };
    }

    /** A number from min to max (a whole one when `whole`), as a two-argument validator. */
    function rangeValidator(min, max, whole) {
        return function (v, _opt) {
            var n = Number(v);
            if (String(v).trim() === '' || isNaN(n) || n < min || n > max || (whole && n !== Math.floor(n))) { return t('errors.range', { min: min, max: max }); }
            return true;
        };
    }

    /** The name, the service and one typed input per field: what every action node's defaults start with. */
    function targetDefaults(fields) {
        var d = {
            name: { value: '' },
            service: { value: '', type: 'charging-service', required: true }
        };
        fields.forEach(function (f) {
            d[f] = { value: '', validate: root.RED.validators.typedInput(f + 'Type', false) };
            d[f + 'Type'] = { value: 'str' };
        });
        return d;
    }

    /** oneditprepare's typed inputs for the fields. */
    function prepareFields(fields) {
        fields.forEach(function (f) {
            root.$('#node-input-' + f).typedInput({ default: 'str', types: TYPES, typeField: '#node-input-' + f + 'Type' });
        });
    }

    /** The defaults of charging-start and charging-stop: the service, one typed input per field, and the wait options. */
    function commandDefaults(fields) {
        var d = targetDefaults(fields);
        d.wait = { value: false };
        d.waitTimeout = {
            value: 60,
            validate: function (v, opt) {
                if (!this.wait && !(root.$ && root.$('#node-input-wait').is(':checked'))) { return true; }
                return rangeValidator(1, 3600)(v, opt);
            }
        };
        d.timeoutOutput = { value: false };
        d.outputs = { value: 1 };
        return d;
    }

    /** oneditprepare of charging-start and charging-stop. */
    function prepareCommand(fields) {
        prepareFields(fields);
        root.$('#node-input-wait').on('change', function () {
            root.$('.charging-wait-row').toggle(root.$(this).is(':checked'));
        }).trigger('change');
    }

    /** oneditsave of charging-start and charging-stop: a second output only when waiting with a timeout output. */
    function saveCommand() {
        this.outputs = root.$('#node-input-wait').is(':checked') && root.$('#node-input-timeoutOutput').is(':checked') ? 2 : 1;
    }

    /**
     * The "Keep state in" select: the context stores of settings.js, as the
     * typedInput of core nodes lists them (RED.settings.context); '' = the
     * default store, labelled with defaultLabel. A store no longer in
     * settings.js stays listed and selected, so that saving does not change it
     * silently (the runtime then reports it).
     */
    function prepareContextStore(selector, current, defaultLabel) {
        var ctx = root.RED.settings.context || { default: 'memory', stores: ['memory'] };
        var select = root.$(selector).empty();
        root.$('<option>').val('').text(defaultLabel(ctx.default)).appendTo(select);
        (ctx.stores || []).forEach(function (store) {
            if (store !== ctx.default) { root.$('<option>').val(store).text(store).appendTo(select); }
        });
        if (current && (ctx.stores || []).indexOf(current) === -1) {
            root.$('<option>').val(current).text(current).appendTo(select);
        }
        select.val(current || '');
    }

    root.ChargingEditor = {
        TYPES: TYPES,
        isLoopback: isLoopback,
        isEnvReference: function (v) { return ENV_REFERENCE.test(String(v || '').trim()); },
        urlValidator: urlValidator,
        rangeValidator: rangeValidator,
        targetDefaults: targetDefaults,
        prepareFields: prepareFields,
        commandDefaults: commandDefaults,
        prepareCommand: prepareCommand,
        saveCommand: saveCommand,
        prepareContextStore: prepareContextStore
    };
})(typeof window !== 'undefined' ? window : globalThis);
